//! The OpenZFS module parameters zprof exports beside the stages, and how to
//! read them from a module's parameters directory.

/// A module parameter worth setting a stage against.
#[derive(Debug)]
pub struct Tunable {
    /// Its name under /sys/module/zfs/parameters.
    pub parameter: &'static str,
    /// The gauge it is exported as.
    pub metric: &'static str,
    /// The gauge's HELP text.
    pub help: &'static str,
}

/// The tunables `serve` exports (the dashboard draws spa_sync against the
/// first; the write throttle starts from the second).
pub const TUNABLES: &[Tunable] = &[
    Tunable {
        parameter: "zfs_txg_timeout",
        metric: "zfs_txg_timeout_seconds",
        help: "zfs_txg_timeout: the longest a txg stays open",
    },
    Tunable {
        parameter: "zfs_dirty_data_max",
        metric: "zfs_dirty_data_max_bytes",
        help: "zfs_dirty_data_max: dirty data a pool may hold before writers wait",
    },
];

/// Reads [`TUNABLES`] from a module's parameters directory; those absent or
/// unreadable are left out.
pub fn read_tunables(parameters: &std::path::Path) -> Vec<(&'static Tunable, f64)> {
    TUNABLES
        .iter()
        .filter_map(|t| {
            std::fs::read_to_string(parameters.join(t.parameter))
                .ok()?
                .trim()
                .parse()
                .ok()
                .map(|v| (t, v))
        })
        .collect()
}
