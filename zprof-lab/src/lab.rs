//! Safe wrappers around the C core: the process-wide libzpool instance
//! ([`Lab`]), a pool with its sparse vdev files ([`Pool`]) and its dataset
//! ([`Dataset`]), plus the stop flag that SIGINT/SIGTERM set.
//!
//! Ownership encodes the teardown order: a dataset is closed (zil_close,
//! disown) before its pool is exported (spa_close, spa_export), the pool's
//! files are removed after the export, and kernel_fini runs last, when the
//! [`Lab`] is finished. Everything lives in one fresh work directory that is
//! removed at the end unless `--keep`.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};

use crate::ffi;
use crate::model::{self, LeafSpec, ModelParams};
use crate::options::{GroupKind, Layout};
use crate::report::{PoolAccount, PoolInfo};

static STOP: AtomicBool = AtomicBool::new(false);
/// Set by a second SIGINT/SIGTERM: stop now, whatever the pool is doing.
static FORCE: AtomicBool = AtomicBool::new(false);

/// How long a stop may take before the lab gives up on its pool: a suspended
/// pool (I/O errors, such as --dir running out of space) never finishes a txg,
/// and every thread waiting for one waits forever.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// True once SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

extern "C" fn on_signal(_sig: c_int) {
    if STOP.swap(true, Ordering::Relaxed) {
        FORCE.store(true, Ordering::Relaxed);
    }
}

/// Makes SIGINT and SIGTERM set the stop flag instead of killing the process,
/// so that a run can still print what it measured and clean up. A second
/// signal, or a stop that takes longer than [`STOP_GRACE`], abandons the pool:
/// the work directory is removed (unless --keep) and the process exits 130.
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches atomics (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    std::thread::spawn(stop_watchdog);
}

/// Waits for a stop request, then for the stop to finish in time.
fn stop_watchdog() {
    let tick = std::time::Duration::from_millis(100);
    while !stop_requested() {
        std::thread::sleep(tick);
    }
    let since = std::time::Instant::now();
    while since.elapsed() < STOP_GRACE && !FORCE.load(Ordering::Relaxed) {
        std::thread::sleep(tick);
    }
    let why = if FORCE.load(Ordering::Relaxed) {
        "a second signal"
    } else {
        "the pool did not stop within 60 s (suspended? is --dir out of space?)"
    };
    crash_cleanup::abandon(why);
    // SAFETY: _exit ends the process without running libzpool's atexit
    // handlers, which would wait for the stuck pool too.
    unsafe { libc::_exit(130) };
}

fn err_buf() -> Vec<c_char> {
    vec![0; 512]
}

fn err_text(buf: &[c_char]) -> String {
    // SAFETY: the C side NUL-terminates within the buffer (vsnprintf).
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Read the process-wide counters of the C core.
pub fn counters() -> ffi::ZlCounters {
    let mut c = ffi::ZlCounters::default();
    // SAFETY: writes into our struct.
    unsafe { ffi::zl_get_counters(&mut c) };
    c
}

/// The work directory: created fresh, removed at the end unless kept.
pub struct WorkDir {
    path: PathBuf,
    keep: bool,
}

/// Files libzpool writes in the work directory besides the vdev files.
const CONFIG_FILES: [&str; 2] = ["zpool.cache", "zpool.cache.tmp"];

impl WorkDir {
    /// Creates `<parent>/zprof-lab-<pid>`; fails if the parent is not writable.
    /// Names the work directories of earlier runs whose process is gone (kept
    /// with `--keep`, or left by a run that was killed), so they can be removed.
    pub fn create(parent: &Path, keep: bool) -> Result<Self, crate::options::OptError> {
        let path = parent.join(format!("zprof-lab-{}", std::process::id()));
        std::fs::create_dir(&path).map_err(|e| {
            crate::options::OptError(format!(
                "cannot create work directory {}: {e}",
                path.display()
            ))
        })?;
        let stale = stale_work_dirs(parent);
        if !stale.is_empty() {
            let list: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
            eprintln!(
                "zprof-lab: work directories of earlier runs that are no longer running (kept with --keep, or \
                 left by a killed run): {}; remove them with `rm -r`",
                list.join(" ")
            );
        }
        let wd = WorkDir { path, keep };
        crash_cleanup::set_dir(&wd.path, keep);
        Ok(wd)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `zprof-lab-<pid>` directories under `parent` whose process no longer exists.
pub fn stale_work_dirs(parent: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let pid: u32 = name.to_str()?.strip_prefix("zprof-lab-")?.parse().ok()?;
            let gone = pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists();
            (gone && e.file_type().ok()?.is_dir()).then(|| e.path())
        })
        .collect();
    v.sort();
    v
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        crash_cleanup::clear();
        if self.keep {
            eprintln!("zprof-lab: kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Removing the work directory when the process dies of a fatal signal: libzpool
/// aborts on a failed assertion (SIGABRT), and a bug can crash it (SIGSEGV, SIGBUS).
///
/// The handler may only use async-signal-safe calls, so everything it needs is
/// prepared beforehand as C strings in an immutable list that is replaced as a
/// whole (atomically) whenever a file is added; replaced lists are leaked, since
/// the handler may be reading one (a few per run). The handler unlinks the known
/// files, removes the directory, says so on stderr with write(2), then re-raises
/// the signal with its default action, so the exit status still tells the crash.
mod crash_cleanup {
    use std::ffi::{CString, c_int};
    use std::path::Path;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicPtr, Ordering};

    struct List {
        dir: CString,
        keep: bool,
        files: Vec<CString>,
    }

    static CURRENT: AtomicPtr<List> = AtomicPtr::new(std::ptr::null_mut());
    /// Serialises updates (never taken in the handler).
    static UPDATE: Mutex<()> = Mutex::new(());

    fn cstr(p: &Path) -> CString {
        CString::new(p.as_os_str().as_encoded_bytes()).unwrap_or_default()
    }

    fn publish(list: Option<List>) {
        let new = list
            .map(|l| Box::into_raw(Box::new(l)))
            .unwrap_or(std::ptr::null_mut());
        // The old list is leaked on purpose (see the module doc).
        CURRENT.swap(new, Ordering::AcqRel);
    }

    fn current() -> Option<&'static List> {
        // SAFETY: published lists are never freed.
        unsafe { CURRENT.load(Ordering::Acquire).as_ref() }
    }

    /// The work directory to clean up (and its config files); installs the handler.
    pub fn set_dir(dir: &Path, keep: bool) {
        let _g = UPDATE.lock().unwrap_or_else(|e| e.into_inner());
        let files = super::CONFIG_FILES
            .iter()
            .map(|f| cstr(&dir.join(f)))
            .collect();
        publish(Some(List {
            dir: cstr(dir),
            keep,
            files,
        }));
        install();
    }

    /// A file the handler must remove.
    pub fn add_file(f: &Path) {
        let _g = UPDATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = current() {
            let mut files = l.files.clone();
            files.push(cstr(f));
            publish(Some(List {
                dir: l.dir.clone(),
                keep: l.keep,
                files,
            }));
        }
    }

    /// Nothing left to clean up (the work directory is being removed normally).
    pub fn clear() {
        let _g = UPDATE.lock().unwrap_or_else(|e| e.into_inner());
        publish(None);
    }

    fn say(parts: &[&[u8]]) {
        for p in parts {
            // SAFETY: write(2) is async-signal-safe; the slices are valid.
            unsafe { libc::write(2, p.as_ptr().cast(), p.len()) };
        }
    }

    /// Unlinks the listed files and removes the directory, with
    /// async-signal-safe calls only; true when the directory is gone.
    fn remove_listed(l: &List) -> bool {
        for f in &l.files {
            // SAFETY: unlink/rmdir are async-signal-safe; NUL-terminated paths.
            unsafe { libc::unlink(f.as_ptr()) };
        }
        // SAFETY: as above.
        unsafe { libc::rmdir(l.dir.as_ptr()) == 0 }
    }

    extern "C" fn on_fatal(sig: c_int) {
        if let Some(l) = current() {
            let dir = l.dir.as_bytes();
            if l.keep {
                say(&[
                    b"zprof-lab: crashed; work directory kept (--keep): ",
                    dir,
                    b"\n",
                ]);
            } else if remove_listed(l) {
                say(&[
                    b"zprof-lab: crashed (fatal signal); removed the work directory ",
                    dir,
                    b"\n",
                ]);
            } else {
                say(&[
                    b"zprof-lab: crashed (fatal signal); could not remove the work directory ",
                    dir,
                    b"\n",
                ]);
            }
        }
        // SAFETY: back to the default action, then die of the same signal.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }

    /// Gives up on the pool (outside a signal handler): removes the work
    /// directory and its files unless --keep, and says so.
    pub fn abandon(why: &str) {
        let Some(l) = current() else {
            eprintln!("zprof-lab: stopping at once ({why})");
            return;
        };
        let dir = l.dir.to_string_lossy();
        if l.keep {
            eprintln!("zprof-lab: stopping at once ({why}); work directory kept (--keep): {dir}");
            return;
        }
        let removed = remove_listed(l);
        eprintln!(
            "zprof-lab: stopping at once ({why}); {} the work directory {dir}",
            if removed {
                "removed"
            } else {
                "could not remove"
            }
        );
    }

    fn install() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            for sig in [
                libc::SIGABRT,
                libc::SIGSEGV,
                libc::SIGBUS,
                libc::SIGFPE,
                libc::SIGILL,
            ] {
                // SAFETY: the handler only makes async-signal-safe calls. SA_RESETHAND
                // makes a second fault inside it fatal at once; SA_ONSTACK is harmless.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = on_fatal as *const () as usize;
                    sa.sa_flags = libc::SA_RESETHAND | libc::SA_ONSTACK;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaction(sig, &sa, std::ptr::null_mut());
                }
            }
        });
    }
}

/// libzpool, initialised once for the process (kernel_init .. kernel_fini).
pub struct Lab {
    _private: (),
}

impl Lab {
    /// kernel_init with a private spa_config_path, and the device-model hooks
    /// installed; the ARC capped at `arc_max` bytes (0: ZFS's default); cache
    /// devices fed without the kernel's limits when `l2arc_fast`.
    pub fn init(workdir: &WorkDir, arc_max: u64, l2arc_fast: bool) -> Result<Lab> {
        let cfg = CString::new(
            workdir
                .path()
                .join("zpool.cache")
                .to_string_lossy()
                .as_bytes(),
        )?;
        model::precise_timers();
        let mut e = err_buf();
        // SAFETY: C strings live for the call; zl_init copies the path.
        let rc = unsafe {
            ffi::zl_init(
                cfg.as_ptr(),
                arc_max,
                l2arc_fast as c_int,
                e.as_mut_ptr(),
                e.len(),
            )
        };
        if rc != 0 {
            bail!("libzpool initialisation failed: {}", err_text(&e));
        }
        model::install();
        Ok(Lab { _private: () })
    }
}

impl Lab {
    /// Sets the write throttle's zfs_dirty_data_max (bytes): writers are
    /// delayed from 60% of it on.
    pub fn set_dirty_data_max(&self, bytes: u64) {
        // SAFETY: a plain store to a libzpool global, after kernel_init.
        unsafe { ffi::zl_set_dirty_data_max(bytes) }
    }
}

/// The ARC's statistics now (counters since the process started).
pub fn arc_stats() -> ffi::ZlArcStats {
    let mut out = ffi::ZlArcStats::default();
    // SAFETY: the out pointer is ours; the sums are read under their own locks.
    unsafe { ffi::zl_arc_stats(&mut out) };
    out
}

impl Drop for Lab {
    fn drop(&mut self) {
        // SAFETY: every pool is exported before the Lab drops (Pool borrows it).
        unsafe { ffi::zl_fini() };
    }
}

/// Everything needed to create a pool and its dataset.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Pool name.
    pub name: String,
    /// Data vdev layout.
    pub layout: Layout,
    /// ashift of every vdev.
    pub ashift: u32,
    /// Size of each sparse file.
    pub vdev_size: u64,
    /// Model of the data vdevs.
    pub vdev_model: ModelParams,
    /// Number of log vdevs.
    pub logs: u32,
    /// Model of the log vdevs.
    pub log_model: ModelParams,
    /// Number of cache devices (L2ARC), each one file.
    pub caches: u32,
    /// Size of each cache device's file (None: `vdev_size`), so that a cache
    /// smaller than the data can be measured.
    pub cache_size: Option<u64>,
    /// Model of the cache devices.
    pub cache_model: ModelParams,
    /// Size of each special vdev's file (None: `vdev_size`), so that the
    /// special class can fill.
    pub special_size: Option<u64>,
    /// Number of special allocation class vdevs, each one file.
    pub specials: u32,
    /// Model of the special vdevs.
    pub special_model: ModelParams,
    /// Attach one more file to the first raidz vdev before the first job
    /// (RAIDZ expansion); the file is made with the others.
    pub expand_raidz: bool,
    /// Dataset properties (`compression`, `checksum`, `sync`, `logbias`).
    pub props: BTreeMap<String, String>,
    /// Block size of data objects.
    pub volblocksize: u64,
}

/// A leaf's allocation class from its top-level vdev's vdev_alloc_bias_t
/// (none, log, special, dedup), as `zpool status` heads its sections.
fn allocation_class(bias: u32, is_log: bool, is_cache: bool) -> String {
    match (is_cache, is_log, bias) {
        (true, _, _) => "cache".into(),
        (_, true, _) | (_, _, 1) => "log".into(),
        (_, _, 0) => "normal".into(),
        (_, _, 2) => "special".into(),
        (_, _, 3) => "dedup".into(),
        (_, _, other) => format!("bias-{other}"),
    }
}

/// One leaf as the pool reports it.
#[derive(Debug, Clone)]
pub struct LeafStat {
    /// vdev guid.
    pub guid: u64,
    /// Log vdev?
    pub is_log: bool,
    /// Cache device (L2ARC)?
    pub is_cache: bool,
    /// Its top-level vdev as zpool_influxdb names vdevs: type and index
    /// ("raidz-0"; a cache device is its own top-level vdev).
    pub top_vdev: String,
    /// Its allocation class: normal, log, special, dedup, cache.
    pub class: String,
    /// Backing file.
    pub path: String,
    /// vs_ops[WRITE].
    pub write_ops: u64,
    /// vs_bytes[WRITE].
    pub write_bytes: u64,
    /// vs_ops[READ].
    pub read_ops: u64,
    /// vs_bytes[READ].
    pub read_bytes: u64,
    /// Flushes (counted by the device-model hook).
    pub flushes: u64,
    /// Latencies of its modelled I/Os and flushes, as ZFS saw them.
    pub device: model::DeviceTimes,
}

/// An open pool with its dataset. Dropping it closes the dataset, exports the
/// pool and removes the vdev files.
pub struct Pool<'lab> {
    _lab: &'lab Lab,
    cfg: PoolConfig,
    p: *mut ffi::ZlPool,
    ds: *mut ffi::ZlDs,
    files: Vec<PathBuf>,
    guids: Vec<u64>,
    /// The file `expand_raidz` attaches, until it is attached.
    expansion_file: Option<PathBuf>,
    start: ffi::ZlCounters,
    info_done: Option<PoolInfo>,
}

/// A shareable handle to the dataset for job threads. The C core's calls are
/// thread-safe (ZFS locks internally; each object has its own range lock).
#[derive(Clone, Copy)]
pub struct Dataset(*mut ffi::ZlDs);
// SAFETY: see above; the pointer stays valid while the owning Pool lives,
// and job threads are scoped inside that lifetime.
unsafe impl Send for Dataset {}
// SAFETY: as above.
unsafe impl Sync for Dataset {}

impl Dataset {
    /// Creates a data object of `blocksize` and returns its index.
    pub fn create_object(&self, blocksize: u64) -> Result<c_int> {
        let mut idx: c_int = -1;
        let mut e = err_buf();
        // SAFETY: valid dataset; outputs are ours.
        let rc =
            unsafe { ffi::zl_obj_create(self.0, blocksize, &mut idx, e.as_mut_ptr(), e.len()) };
        if rc != 0 {
            bail!("creating an object: {}", err_text(&e));
        }
        Ok(idx)
    }

    /// One write (tx + dmu_write + TX_WRITE itx); returns an errno on failure.
    pub fn write(&self, obj: c_int, off: u64, buf: &[u8], sync: bool) -> Result<(), i32> {
        // SAFETY: buf outlives the call; the C side copies it.
        let rc = unsafe {
            ffi::zl_write(
                self.0,
                obj,
                off,
                buf.len() as u64,
                buf.as_ptr().cast(),
                sync as c_int,
            )
        };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }

    /// One dmu_read.
    pub fn read(&self, obj: c_int, off: u64, buf: &mut [u8]) -> Result<(), i32> {
        // SAFETY: buf is writable for its length.
        let rc =
            unsafe { ffi::zl_read(self.0, obj, off, buf.len() as u64, buf.as_mut_ptr().cast()) };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }

    /// A warm-up read of `buf.len()` bytes at `off`, after a prefetch of
    /// `ahead` bytes at `from` (see zl_warm: not a dmu_read).
    pub fn warm(
        &self,
        obj: c_int,
        off: u64,
        buf: &mut [u8],
        (from, ahead): (u64, u64),
    ) -> Result<(), i32> {
        // SAFETY: buf is writable for its length; valid dataset and object index.
        let rc = unsafe {
            ffi::zl_warm(
                self.0,
                obj,
                off,
                buf.len() as u64,
                from,
                ahead,
                buf.as_mut_ptr().cast(),
            )
        };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }

    /// zil_commit for the object (counted as the lab's).
    pub fn commit(&self, obj: c_int) {
        // SAFETY: valid dataset and object index.
        unsafe { ffi::zl_commit(self.0, obj) }
    }
}

/// The vdev files of a pool: data, logs, specials, caches, in that order.
fn vdev_files(dir: &Path, cfg: &PoolConfig) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for i in 0..cfg.layout.data_files() {
        files.push(dir.join(format!("{}-d{i}", cfg.name)));
    }
    for i in 0..cfg.logs {
        files.push(dir.join(format!("{}-log{i}", cfg.name)));
    }
    for i in 0..cfg.specials {
        files.push(dir.join(format!("{}-special{i}", cfg.name)));
    }
    for i in 0..cfg.caches {
        files.push(dir.join(format!("{}-cache{i}", cfg.name)));
    }
    files
}

impl<'lab> Pool<'lab> {
    /// Creates the sparse files, the pool and its dataset, and puts the leaves
    /// under their device models.
    pub fn create(lab: &'lab Lab, dir: &Path, cfg: PoolConfig) -> Result<Pool<'lab>> {
        let files = vdev_files(dir, &cfg);
        let mut pool = Pool {
            _lab: lab,
            cfg,
            p: std::ptr::null_mut(),
            ds: std::ptr::null_mut(),
            files: Vec::new(),
            guids: Vec::new(),
            expansion_file: None,
            start: counters(),
            info_done: None,
        };
        pool.create_files(&files)?;
        pool.create_zpool(&files)?;
        if pool.cfg.expand_raidz {
            let file = dir.join(format!("{}-expand0", pool.cfg.name));
            pool.create_file(&file, pool.cfg.vdev_size)?;
            pool.expansion_file = Some(file);
        }
        // Leaves go under their models only now: pool creation itself is not measured.
        pool.put_leaves_under_models();
        pool.open_dataset()?;
        Ok(pool)
    }

    /// Creates the sparse vdev files (each kept in `files` at once, so that a
    /// failure removes those made).
    fn create_files(&mut self, files: &[PathBuf]) -> Result<()> {
        let cfg = &self.cfg;
        let first_cache = files.len() - cfg.caches as usize;
        let first_special = first_cache - cfg.specials as usize;
        let sizes: Vec<u64> = (0..files.len())
            .map(|i| {
                if i >= first_cache {
                    cfg.cache_size.unwrap_or(cfg.vdev_size)
                } else if i >= first_special {
                    cfg.special_size.unwrap_or(cfg.vdev_size)
                } else {
                    cfg.vdev_size
                }
            })
            .collect();
        for (f, size) in files.iter().zip(sizes) {
            self.create_file(f, size)?;
        }
        Ok(())
    }

    /// Creates one sparse vdev file, kept in `files` at once (removed with the pool).
    fn create_file(&mut self, f: &Path, size: u64) -> Result<()> {
        crash_cleanup::add_file(f);
        let file = std::fs::File::create(f).with_context(|| format!("creating {}", f.display()))?;
        self.files.push(f.to_path_buf());
        file.set_len(size)
            .with_context(|| format!("sizing {}", f.display()))
    }

    /// Whether `expand_raidz` asked for an expansion not started yet.
    pub fn expansion_pending(&self) -> bool {
        self.expansion_file.is_some()
    }

    /// Starts the RAIDZ expansion asked for (`zpool attach POOL raidz-0 FILE`)
    /// and puts the new leaf under the data vdevs' model. ZFS starts the
    /// reflow in its expansion thread once the attach has synced.
    pub fn expand_raidz(&mut self) -> Result<()> {
        let Some(file) = self.expansion_file.take() else {
            return Ok(());
        };
        let path = CString::new(file.to_string_lossy().as_bytes())?;
        let mut e = err_buf();
        // SAFETY: open pool; the strings outlive the call.
        let rc = unsafe {
            ffi::zl_pool_expand(
                self.p,
                path.as_ptr(),
                self.cfg.ashift as u64,
                e.as_mut_ptr(),
                e.len(),
            )
        };
        if rc != 0 {
            bail!("expanding pool {}: {}", self.cfg.name, err_text(&e));
        }
        let new: Vec<LeafSpec> = self
            .leaf_stats()
            .into_iter()
            .filter(|l| !self.guids.contains(&l.guid))
            .map(|l| LeafSpec {
                guid: l.guid,
                path: PathBuf::from(&l.path),
                params: self.cfg.vdev_model.clone(),
            })
            .collect();
        self.guids.extend(new.iter().map(|l| l.guid));
        model::register_leaves(&new);
        Ok(())
    }

    /// The pool's RAIDZ expansion, if one started.
    pub fn expansion(&self) -> Option<ffi::ZlExpansion> {
        let mut out = ffi::ZlExpansion::default();
        // SAFETY: open pool; the output is ours.
        let rc = unsafe { ffi::zl_pool_expansion(self.p, &mut out) };
        (rc == 0).then_some(out)
    }

    /// Creates the pool on `files` (data, logs, specials, caches in
    /// [`vdev_files`]'s order), its txg bounds and counters reset first.
    fn create_zpool(&mut self, files: &[PathBuf]) -> Result<()> {
        let cfg = &self.cfg;
        let l = &cfg.layout;
        let cpaths: Vec<CString> = files
            .iter()
            .map(|f| CString::new(f.to_string_lossy().as_bytes()))
            .collect::<Result<_, _>>()?;
        let nd = l.data_files() as usize;
        let data: Vec<*const c_char> = cpaths[..nd].iter().map(|c| c.as_ptr()).collect();
        let nl = nd + cfg.logs as usize;
        let ns = nl + cfg.specials as usize;
        let logs: Vec<*const c_char> = cpaths[nd..nl].iter().map(|c| c.as_ptr()).collect();
        let specials: Vec<*const c_char> = cpaths[nl..ns].iter().map(|c| c.as_ptr()).collect();
        let caches: Vec<*const c_char> = cpaths[ns..].iter().map(|c| c.as_ptr()).collect();
        let gtype = CString::new(match l.kind {
            GroupKind::Stripe => "file",
            GroupKind::Mirror => "mirror",
            GroupKind::Raidz => "raidz",
        })?;
        let name = CString::new(cfg.name.as_str())?;
        let mut e = err_buf();
        // SAFETY: txg bounds are reset so this pool's first/last synced txg can be read.
        unsafe { ffi::zl_txg_mark() };
        self.start = counters();
        // SAFETY: all strings outlive the call; out pointer is ours.
        let rc = unsafe {
            ffi::zl_pool_create(
                name.as_ptr(),
                gtype.as_ptr(),
                l.nparity as c_int,
                l.width as c_int,
                l.groups as c_int,
                data.as_ptr(),
                cfg.ashift as u64,
                logs.as_ptr(),
                logs.len() as c_int,
                specials.as_ptr(),
                specials.len() as c_int,
                caches.as_ptr(),
                caches.len() as c_int,
                &mut self.p,
                e.as_mut_ptr(),
                e.len(),
            )
        };
        if rc != 0 {
            bail!("creating pool {}: {}", cfg.name, err_text(&e));
        }
        Ok(())
    }

    /// Registers each leaf with the device model of its class.
    fn put_leaves_under_models(&mut self) {
        let cfg = &self.cfg;
        let leaves = self.leaf_stats();
        let specs: Vec<LeafSpec> = leaves
            .iter()
            .map(|lf| LeafSpec {
                guid: lf.guid,
                path: PathBuf::from(&lf.path),
                params: match lf.class.as_str() {
                    "cache" => cfg.cache_model.clone(),
                    "log" => cfg.log_model.clone(),
                    "special" => cfg.special_model.clone(),
                    _ => cfg.vdev_model.clone(),
                },
            })
            .collect();
        self.guids = leaves.iter().map(|l| l.guid).collect();
        model::register_leaves(&specs);
    }

    /// Creates and opens the dataset `POOL/lab` with the configuration's properties.
    fn open_dataset(&mut self) -> Result<()> {
        let cfg = &self.cfg;
        let dsname = CString::new(format!("{}/lab", cfg.name))?;
        let (pn, pv): (Vec<CString>, Vec<CString>) = cfg
            .props
            .iter()
            .map(|(k, v)| {
                (
                    CString::new(k.as_str()).unwrap_or_default(),
                    CString::new(v.as_str()).unwrap_or_default(),
                )
            })
            .unzip();
        let pnp: Vec<*const c_char> = pn.iter().map(|c| c.as_ptr()).collect();
        let pvp: Vec<*const c_char> = pv.iter().map(|c| c.as_ptr()).collect();
        let mut e = err_buf();
        // SAFETY: as above.
        let rc = unsafe {
            ffi::zl_ds_open(
                self.p,
                dsname.as_ptr(),
                pnp.as_ptr(),
                pvp.as_ptr(),
                pnp.len() as c_int,
                &mut self.ds,
                e.as_mut_ptr(),
                e.len(),
            )
        };
        if rc != 0 {
            bail!(
                "creating dataset {}: {}",
                dsname.to_string_lossy(),
                err_text(&e)
            );
        }
        Ok(())
    }

    /// The configuration it was created with.
    pub fn config(&self) -> &PoolConfig {
        &self.cfg
    }

    /// The dataset handle for job threads.
    pub fn dataset(&self) -> Dataset {
        Dataset(self.ds)
    }

    /// Leaf vdevs with their cumulative counters.
    pub fn leaf_stats(&self) -> Vec<LeafStat> {
        let mut v: Vec<ffi::ZlLeaf> = Vec::with_capacity(300);
        // SAFETY: capacity 300 >= max leaves (255 data + logs); C fills `n` entries.
        let n = unsafe { ffi::zl_pool_leaves(self.p, v.as_mut_ptr(), 300) };
        // SAFETY: the first min(n, 300) entries were initialised.
        unsafe { v.set_len(n.clamp(0, 300) as usize) };
        v.iter()
            .map(|l| LeafStat {
                guid: l.guid,
                is_log: l.is_log != 0,
                is_cache: l.is_cache != 0,
                // SAFETY: NUL-terminated by strlcpy (zeroed struct otherwise).
                top_vdev: format!(
                    "{}-{}",
                    unsafe { CStr::from_ptr(l.top_type.as_ptr()) }.to_string_lossy(),
                    l.top_id
                ),
                class: allocation_class(l.alloc_bias, l.is_log != 0, l.is_cache != 0),
                // SAFETY: NUL-terminated by strlcpy (zeroed struct otherwise).
                path: unsafe { CStr::from_ptr(l.path.as_ptr()) }
                    .to_string_lossy()
                    .into_owned(),
                write_ops: l.write_ops,
                write_bytes: l.write_bytes,
                read_ops: l.read_ops,
                read_bytes: l.read_bytes,
                flushes: model::flushes(l.guid),
                device: model::device_times(l.guid),
            })
            .collect()
    }

    /// Waits until all writes so far are synced (`all`: also the txgs after them).
    pub fn sync(&self, all: bool) -> u64 {
        // SAFETY: valid pool.
        unsafe { ffi::zl_pool_sync(self.p, all as c_int) }
    }

    /// Drops the dataset's cached data (dbufs, then ARC) so reads reach the vdevs.
    pub fn evict_cache(&self) {
        // SAFETY: valid dataset.
        unsafe { ffi::zl_ds_evict(self.ds) }
    }

    /// Space accounting now (call after a sync for settled figures).
    pub fn account(&self) -> PoolAccount {
        let mut ps = ffi::ZlPoolStats::default();
        let mut ds = ffi::ZlDsStats::default();
        // SAFETY: valid handles, outputs are ours.
        unsafe {
            ffi::zl_pool_stats(self.p, &mut ps);
            ffi::zl_ds_stats(self.ds, &mut ds);
        }
        let leaves = self.leaf_stats();
        PoolAccount {
            name: self.cfg.name.clone(),
            alloc_bytes: ps.normal_alloc,
            log_alloc_bytes: ps.log_alloc,
            special_alloc_bytes: ps.special_alloc,
            special_size_bytes: ps.special_space,
            size_bytes: ps.dspace,
            used_bytes: ds.referenced,
            logical_used_bytes: ds.uncompressed,
            compressratio: ds.compressratio as f64 / 100.0,
            leaf_write_bytes: leaves.iter().map(|l| l.write_bytes).sum(),
            leaf_read_bytes: leaves.iter().map(|l| l.read_bytes).sum(),
            last_synced_txg: ps.last_synced_txg,
            dedup_ratio: ps.dedup_ratio_x100 as f64 / 100.0,
        }
    }

    /// Closes the dataset, exports the pool, removes its files; returns the
    /// pool's description with its spa_sync count and txg range.
    pub fn finish(mut self) -> Result<PoolInfo> {
        let r = self.teardown();
        r.map(|()| self.info_done.take().expect("teardown fills info"))
    }

    fn teardown(&mut self) -> Result<()> {
        if !self.ds.is_null() {
            // SAFETY: valid dataset, closed once.
            unsafe { ffi::zl_ds_close(self.ds) };
            self.ds = std::ptr::null_mut();
        }
        let mut result = Ok(());
        if !self.p.is_null() {
            // SAFETY: valid pool, exported once (frees the handle).
            let rc = unsafe { ffi::zl_pool_export(self.p) };
            self.p = std::ptr::null_mut();
            if rc != 0 {
                result = Err(anyhow::anyhow!(
                    "exporting pool {}: {}",
                    self.cfg.name,
                    std::io::Error::from_raw_os_error(rc)
                ));
            }
        }
        model::unregister_leaves(&self.guids);
        let end = counters();
        let c = &self.cfg;
        self.info_done = Some(PoolInfo {
            name: c.name.clone(),
            layout: c.layout.clone(),
            layout_text: c.layout.to_string(),
            ashift: c.ashift,
            vdev_size: c.vdev_size,
            vdev_model: c.vdev_model.clone(),
            log_vdevs: c.logs,
            log_model: c.log_model.clone(),
            caches: c.caches,
            cache_model: (c.caches > 0).then(|| c.cache_model.clone()),
            specials: c.specials,
            special_model: (c.specials > 0).then(|| c.special_model.clone()),
            properties: c.props.clone(),
            volblocksize: c.volblocksize,
            spa_sync_calls: end.spa_syncs - self.start.spa_syncs,
            first_txg: if end.txg_min == u64::MAX {
                0
            } else {
                end.txg_min
            },
            last_txg: end.txg_max,
        });
        for f in self.files.drain(..) {
            let _ = std::fs::remove_file(&f);
        }
        result
    }
}

impl Drop for Pool<'_> {
    fn drop(&mut self) {
        if self.info_done.is_none()
            && let Err(e) = self.teardown()
        {
            eprintln!("zprof-lab: {e:#}");
        }
    }
}
