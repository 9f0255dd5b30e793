//! Parsing and validation of everything a user can specify: sizes, durations,
//! rates, pool layouts, dataset properties and fio-style job descriptions.
//!
//! Validation happens here, before any file or pool exists, so that bad input
//! fails with one line and leaves nothing behind (libzpool itself tends to
//! abort the process on inputs it does not expect).

use std::fmt;
use std::str::FromStr;

/// A user-input error: one line, shown as `zprof-lab: <message>`, exit code 2.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct OptError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, OptError> {
    Err(OptError(msg.into()))
}

/// Parses a byte size: `4096`, `4k`, `8K`, `1m`, `16g`, `1MiB`, `512b` (binary units).
pub fn parse_size(s: &str) -> Result<u64, OptError> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(digits_end);
    let n: u64 = num
        .parse()
        .map_err(|_| OptError(format!("bad size '{s}'")))?;
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return err(format!("bad size '{s}' (units: k, m, g, t)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| OptError(format!("size '{s}' is too large")))
}

/// Parses a duration to nanoseconds: `8ms`, `100us`, `2.5ms`, `1s`, `500ns`; a bare number is seconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, OptError> {
    let t = s.trim();
    let num_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(num_end);
    let v: f64 = num
        .parse()
        .map_err(|_| OptError(format!("bad duration '{s}'")))?;
    let mult = match unit {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        _ => return err(format!("bad duration '{s}' (units: s, ms, us, ns)")),
    };
    let ns = v * mult;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return err(format!("bad duration '{s}'"));
    }
    Ok(ns.round() as u64)
}

/// Parses a transfer rate in bytes per second: `200MiB/s`, `1g`, `500m/s`.
pub fn parse_rate(s: &str) -> Result<u64, OptError> {
    let t = s.trim().trim_end_matches("/s");
    let v = parse_size(t)?;
    if v == 0 {
        return err(format!("rate '{s}' must be > 0"));
    }
    Ok(v)
}

/// Kind of top-level vdev group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupKind {
    /// Plain files, each its own top-level vdev.
    Stripe,
    /// n-way mirrors.
    Mirror,
    /// RAID-Z with 1, 2 or 3 parity columns.
    Raidz,
}

/// Pool layout: `ngroups` top-level vdevs of `width` files each, plus log vdevs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    /// Group kind.
    pub kind: GroupKind,
    /// Parity columns (raidz only, else 0).
    pub nparity: u32,
    /// Files per group (1 for a stripe).
    pub width: u32,
    /// Number of top-level groups.
    pub groups: u32,
}

impl Layout {
    /// Number of data (non-log) files.
    pub fn data_files(&self) -> u32 {
        self.width * self.groups
    }
}

impl FromStr for Layout {
    type Err = OptError;

    /// `stripe:N`, `mirror:W[xG]`, `raidz[1|2|3]:W[xG]`.
    fn from_str(s: &str) -> Result<Self, OptError> {
        let (kind, n) = s.split_once(':').ok_or_else(|| {
            OptError(format!(
                "layout '{s}': expected KIND:N, e.g. raidz3:8, mirror:2x2, stripe:4"
            ))
        })?;
        let (w, g) = n.split_once('x').unwrap_or((n, "1"));
        let num = |v: &str| -> Result<u32, OptError> {
            v.parse()
                .map_err(|_| OptError(format!("layout '{s}': bad number '{v}'")))
        };
        let (w, g) = (num(w)?, num(g)?);
        if g == 0 || w == 0 {
            return err(format!("layout '{s}': counts must be > 0"));
        }
        let layout = match kind {
            "stripe" => Layout {
                kind: GroupKind::Stripe,
                nparity: 0,
                width: 1,
                groups: w * g,
            },
            "mirror" => {
                if w < 2 {
                    return err(format!("layout '{s}': a mirror needs at least 2 vdevs"));
                }
                Layout {
                    kind: GroupKind::Mirror,
                    nparity: 0,
                    width: w,
                    groups: g,
                }
            }
            "raidz" | "raidz1" | "raidz2" | "raidz3" => {
                let p: u32 = kind
                    .strip_prefix("raidz")
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(1);
                if w < p + 1 {
                    return err(format!(
                        "layout '{s}': raidz{p} needs at least {} vdevs, got {w}",
                        p + 1
                    ));
                }
                Layout {
                    kind: GroupKind::Raidz,
                    nparity: p,
                    width: w,
                    groups: g,
                }
            }
            other => {
                return err(format!(
                    "layout '{s}': unknown kind '{other}' (stripe, mirror, raidz1/2/3)"
                ));
            }
        };
        if layout.data_files() > 255 {
            return err(format!("layout '{s}': too many vdevs"));
        }
        Ok(layout)
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            GroupKind::Stripe => write!(f, "stripe:{}", self.groups),
            GroupKind::Mirror => write!(f, "mirror:{}x{}", self.width, self.groups),
            GroupKind::Raidz => write!(f, "raidz{}:{}x{}", self.nparity, self.width, self.groups),
        }
    }
}

/// Validates a compression property value as `zfs set compression=` accepts it.
pub fn check_compression(v: &str) -> Result<(), OptError> {
    let ok = match v {
        "on" | "off" | "lz4" | "lzjb" | "zle" | "gzip" | "zstd" | "zstd-fast" => true,
        _ => {
            let level = |pfx: &str, lo: u32, hi: u32| {
                v.strip_prefix(pfx)
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|n| n >= lo && n <= hi)
            };
            let fast = v
                .strip_prefix("zstd-fast-")
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| {
                    (1..=10).contains(&n)
                        || [20, 30, 40, 50, 60, 70, 80, 90, 100, 500, 1000].contains(&n)
                });
            level("gzip-", 1, 9) || (level("zstd-", 1, 19) && !v.starts_with("zstd-fast")) || fast
        }
    };
    if ok {
        Ok(())
    } else {
        err(format!(
            "unknown compression '{v}' (off, on, lz4, lzjb, zle, gzip[-1..9], zstd[-1..19], zstd-fast[-N])"
        ))
    }
}

/// Validates a checksum property value.
pub fn check_checksum(v: &str) -> Result<(), OptError> {
    match v {
        "on" | "off" | "fletcher2" | "fletcher4" | "sha256" | "sha512" | "skein" | "edonr"
        | "noparity" => Ok(()),
        _ => err(format!(
            "unknown checksum '{v}' (on, off, fletcher2, fletcher4, sha256, sha512, skein, edonr)"
        )),
    }
}

/// Validates the sync property.
pub fn check_sync(v: &str) -> Result<(), OptError> {
    match v {
        "standard" | "always" | "disabled" => Ok(()),
        _ => err(format!("unknown sync '{v}' (standard, always, disabled)")),
    }
}

/// Validates the logbias property.
pub fn check_logbias(v: &str) -> Result<(), OptError> {
    match v {
        "latency" | "throughput" => Ok(()),
        _ => err(format!("unknown logbias '{v}' (latency, throughput)")),
    }
}

/// Validates the dedup property.
pub fn check_dedup(v: &str) -> Result<(), OptError> {
    match v {
        "off" | "on" | "verify" | "sha256" | "sha256,verify" | "sha512" | "sha512,verify"
        | "skein" | "skein,verify" => Ok(()),
        _ => err(format!(
            "unknown dedup '{v}' (off, on, verify, sha256[,verify], sha512[,verify], skein[,verify])"
        )),
    }
}

/// Validates the primarycache property.
pub fn check_primarycache(v: &str) -> Result<(), OptError> {
    match v {
        "all" | "metadata" | "none" => Ok(()),
        _ => err(format!("unknown primarycache '{v}' (all, metadata, none)")),
    }
}

/// Validates a volblocksize: a power of two from 512 B to 1 MiB.
pub fn check_volblocksize(v: u64) -> Result<(), OptError> {
    if v.is_power_of_two() && (512..=1 << 20).contains(&v) {
        Ok(())
    } else {
        err(format!(
            "volblocksize {v} must be a power of two from 512 to 1M"
        ))
    }
}

/// I/O pattern of a job, fio's `rw=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    /// Sequential writes.
    Write,
    /// Random writes.
    Randwrite,
    /// Sequential reads.
    Read,
    /// Random reads.
    Randread,
    /// Random mix (see `rwmixread`).
    Randrw,
}

impl fmt::Display for Rw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rw::Write => "write",
            Rw::Randwrite => "randwrite",
            Rw::Read => "read",
            Rw::Randread => "randread",
            Rw::Randrw => "randrw",
        })
    }
}

impl Rw {
    /// Whether offsets are random.
    pub fn random(self) -> bool {
        matches!(self, Rw::Randwrite | Rw::Randread | Rw::Randrw)
    }
    /// Whether the job reads anything (and so needs data laid out first).
    pub fn reads(self) -> bool {
        matches!(self, Rw::Read | Rw::Randread | Rw::Randrw)
    }
}

/// One job, in fio's vocabulary (`--job name=x,rw=randwrite,bs=4k,...`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobSpec {
    /// Job name.
    pub name: String,
    /// I/O pattern.
    pub rw: Rw,
    /// Block size of each I/O in bytes.
    pub bs: u64,
    /// Extent of each thread's object in bytes.
    pub size: u64,
    /// Run time in seconds (0 = until `ios` are done).
    pub runtime_s: f64,
    /// I/Os per thread (0 = until `runtime`).
    pub ios: u64,
    /// Threads, each on its own object.
    pub numjobs: u32,
    /// zil_commit after every N writes (0 = never), like fio's fsync=N.
    pub fsync: u64,
    /// Every write is synchronous (logged as such and committed at once), like O_SYNC.
    pub sync: bool,
    /// Percent of each write buffer that is a zero pattern (fio's implementation of
    /// buffer_compress_percentage); 0 = incompressible random data.
    pub buffer_compress_percentage: u32,
    /// Percent reads for randrw.
    pub rwmixread: u32,
    /// fio's dedupe_percentage: with it, each write is unique (stamped) except
    /// this percent, which repeat one of a few earlier blocks; without it the
    /// data repeats every 4 MiB (what a pool without dedup never notices).
    #[serde(default)]
    pub dedupe_percentage: Option<u32>,
    /// Sequential read passes over each object after the layout, before the
    /// measured run (unmeasured): they fill the ARC and let the L2ARC feed
    /// write what the ARC evicts, so cache devices start warm.
    #[serde(default)]
    pub warmup_passes: u32,
}

impl JobSpec {
    /// Parses `key=value,...`; `index` names an unnamed job.
    pub fn parse(s: &str, index: usize) -> Result<Self, OptError> {
        let mut j = JobSpec {
            name: format!("job{index}"),
            rw: Rw::Randwrite,
            bs: 4096,
            size: 1 << 30,
            runtime_s: 0.0,
            ios: 0,
            numjobs: 1,
            fsync: 0,
            sync: false,
            buffer_compress_percentage: 0,
            rwmixread: 50,
            dedupe_percentage: None,
            warmup_passes: 0,
        };
        for kv in s.split(',').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| OptError(format!("job option '{kv}' is not key=value")))?;
            let int = |v: &str| -> Result<u64, OptError> {
                v.parse()
                    .map_err(|_| OptError(format!("job option {k}: bad number '{v}'")))
            };
            // A value `as u32` would wrap (numjobs=4294967297 is 1 job): refuse instead.
            let small = |v: &str| -> Result<u32, OptError> {
                u32::try_from(int(v)?)
                    .map_err(|_| OptError(format!("job option {k}: '{v}' is out of range")))
            };
            match k {
                "name" => j.name = v.to_string(),
                "rw" | "readwrite" => {
                    j.rw = match v {
                        "write" => Rw::Write,
                        "randwrite" => Rw::Randwrite,
                        "read" => Rw::Read,
                        "randread" => Rw::Randread,
                        "randrw" => Rw::Randrw,
                        _ => {
                            return err(format!(
                                "unknown rw '{v}' (write, randwrite, read, randread, randrw)"
                            ));
                        }
                    }
                }
                "bs" => j.bs = parse_size(v)?,
                "size" => j.size = parse_size(v)?,
                "runtime" => {
                    j.runtime_s = parse_duration_ns(v)? as f64 / 1e9;
                    if j.runtime_s <= 0.0 {
                        return err(format!(
                            "job option runtime: '{v}' must be positive (ios=N runs a number of I/Os instead)"
                        ));
                    }
                }
                "ios" | "number_ios" => j.ios = int(v)?,
                "numjobs" => j.numjobs = small(v)?,
                "fsync" => j.fsync = int(v)?,
                "sync" => {
                    j.sync = match v {
                        "1" | "true" | "sync" => true,
                        "0" | "false" | "none" => false,
                        _ => return err(format!("job option sync: expected 0 or 1, got '{v}'")),
                    }
                }
                "buffer_compress_percentage" => j.buffer_compress_percentage = small(v)?,
                "rwmixread" => j.rwmixread = small(v)?,
                "dedupe_percentage" => j.dedupe_percentage = Some(small(v)?),
                "warmup" => j.warmup_passes = small(v)?,
                other => return err(format!("unknown job option '{other}'")),
            }
        }
        j.validate()?;
        Ok(j)
    }

    /// Checks the combination of values.
    pub fn validate(&mut self) -> Result<(), OptError> {
        let n = &self.name;
        if self.name.is_empty()
            || self
                .name
                .contains(|c: char| c.is_whitespace() || c == '/' || c == '@')
        {
            return err(format!(
                "job name '{n}' must be non-empty, without spaces, '/' or '@'"
            ));
        }
        if self.bs == 0 || !self.bs.is_multiple_of(512) {
            return err(format!(
                "job {n}: bs {} must be a positive multiple of 512",
                self.bs
            ));
        }
        if self.bs > 16 << 20 {
            return err(format!("job {n}: bs {} is larger than 16M", self.bs));
        }
        if self.bs > self.size {
            return err(format!(
                "job {n}: bs {} is larger than size {}",
                self.bs, self.size
            ));
        }
        if self.numjobs == 0 || self.numjobs > 64 {
            return err(format!("job {n}: numjobs must be 1..64"));
        }
        if self.buffer_compress_percentage > 100
            || self.rwmixread > 100
            || self.dedupe_percentage.is_some_and(|p| p > 100)
        {
            return err(format!("job {n}: percentages must be 0..100"));
        }
        if self.warmup_passes > 0 && !self.rw.reads() {
            return err(format!(
                "job {n}: warmup reads the job's data, so it needs a reading rw (read, randread, randrw)"
            ));
        }
        if self.warmup_passes > 16 {
            return err(format!("job {n}: warmup must be at most 16 passes"));
        }
        if self.runtime_s == 0.0 && self.ios == 0 {
            self.runtime_s = 5.0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("16G").unwrap(), 16 << 30);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert!(parse_size("4q").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999t").is_err());
    }

    #[test]
    fn durations_and_rates() {
        assert_eq!(parse_duration_ns("8ms").unwrap(), 8_000_000);
        assert_eq!(parse_duration_ns("2.5ms").unwrap(), 2_500_000);
        assert_eq!(parse_duration_ns("100us").unwrap(), 100_000);
        assert_eq!(parse_duration_ns("5").unwrap(), 5_000_000_000);
        assert!(parse_duration_ns("5h").is_err());
        assert_eq!(parse_rate("200MiB/s").unwrap(), 200 << 20);
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn layouts() {
        let l: Layout = "raidz3:8".parse().unwrap();
        assert_eq!(
            (l.kind, l.nparity, l.width, l.groups),
            (GroupKind::Raidz, 3, 8, 1)
        );
        let l: Layout = "mirror:2x3".parse().unwrap();
        assert_eq!((l.width, l.groups, l.data_files()), (2, 3, 6));
        let l: Layout = "stripe:4".parse().unwrap();
        assert_eq!((l.width, l.groups), (1, 4));
        assert_eq!("raidz:3".parse::<Layout>().unwrap().nparity, 1);
        let e = "raidz3:3".parse::<Layout>().unwrap_err();
        assert!(e.0.contains("at least 4"), "{e}");
        assert!("mirror:1".parse::<Layout>().is_err());
        assert!("raid5:4".parse::<Layout>().is_err());
        assert!("stripe".parse::<Layout>().is_err());
    }

    #[test]
    fn properties() {
        for ok in [
            "off",
            "lz4",
            "gzip-9",
            "zstd",
            "zstd-19",
            "zstd-fast",
            "zstd-fast-5",
        ] {
            check_compression(ok).unwrap();
        }
        for bad in ["lz5", "gzip-10", "zstd-20", "zstd-fast-11", "zstd-0"] {
            assert!(check_compression(bad).is_err(), "{bad}");
        }
        assert!(check_sync("always").is_ok() && check_sync("sometimes").is_err());
        assert!(check_primarycache("metadata").is_ok() && check_primarycache("data").is_err());
        assert!(check_volblocksize(8192).is_ok() && check_volblocksize(12288).is_err());
    }

    #[test]
    fn jobs() {
        let j = JobSpec::parse("name=f,rw=randwrite,bs=4k,size=64m,fsync=1,runtime=2", 0).unwrap();
        assert_eq!(
            (j.bs, j.size, j.fsync, j.runtime_s),
            (4096, 64 << 20, 1, 2.0)
        );
        let j = JobSpec::parse("rw=read", 3).unwrap();
        assert_eq!((j.name.as_str(), j.runtime_s), ("job3", 5.0));
        let j = JobSpec::parse("ios=100", 0).unwrap();
        assert_eq!((j.ios, j.runtime_s), (100, 0.0));
        assert!(
            JobSpec::parse("bs=1m,size=64k", 0)
                .unwrap_err()
                .0
                .contains("larger than size")
        );
        assert!(JobSpec::parse("rw=trim", 0).is_err());
        assert!(JobSpec::parse("iodepth=4", 0).is_err());
        assert!(JobSpec::parse("bs=1000", 0).is_err());
    }

    #[test]
    fn out_of_range_job_values_are_refused_not_wrapped() {
        assert!(
            JobSpec::parse("numjobs=4294967297", 0)
                .unwrap_err()
                .0
                .contains("out of range")
        );
        assert!(
            JobSpec::parse("rwmixread=4294967346", 0)
                .unwrap_err()
                .0
                .contains("out of range")
        );
        assert!(
            JobSpec::parse("buffer_compress_percentage=4294967296", 0)
                .unwrap_err()
                .0
                .contains("out of range")
        );
        assert!(
            JobSpec::parse("runtime=0", 0)
                .unwrap_err()
                .0
                .contains("must be positive")
        );
        assert!(JobSpec::parse("runtime=-1", 0).is_err());
        assert!(
            JobSpec::parse("numjobs=65", 0)
                .unwrap_err()
                .0
                .contains("1..64")
        );
    }
}
