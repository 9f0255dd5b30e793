//! What a live session exports at one scrape (`serve`, `top`): the cumulative
//! rows and zprof's own health, the same vocabulary a recording holds.

use crate::{
    recording::requests::RequestRecord,
    recording::{HistRecord, Recording, VdevRecord},
    zfs::tunables::Tunable,
};

/// What one scrape exports.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// The stage rows (cumulative).
    pub rows: Vec<HistRecord>,
    /// The request layer's rows.
    pub requests: Vec<RequestRecord>,
    /// Where each leaf vdev sits (its rows' top-level vdev and class labels).
    pub vdevs: Vec<VdevRecord>,
    /// zprof's own health.
    pub health: Health,
}

impl Scrape {
    /// A recording's rows, for exporting what it holds.
    pub fn of_recording(recording: &Recording) -> Scrape {
        Scrape {
            rows: recording.histograms.clone(),
            requests: recording.requests.clone(),
            vdevs: recording.vdevs.clone(),
            health: Health::default(),
        }
    }
}

/// What `serve` exports besides the stages.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// The traced build: "kernel" or "libzpool".
    pub target: String,
    /// Its OpenZFS release.
    pub zfs_version: String,
    /// Whether zprof verified how it reads that build ("verified"...).
    pub zfs_status: String,
    /// Probe points attached.
    pub probes_attached: u64,
    /// Probe points considered and not attached.
    pub probes_unavailable: u64,
    /// Lost or unmatched events by cause (Losses' names).
    pub losses: Vec<(String, u64)>,
    /// Return probes without an entry, by stage.
    pub unmatched_by_stage: Vec<(String, u64)>,
    /// Per loaded program: runs and run time (ns).
    pub programs: Vec<(String, u64, u64)>,
    /// Time from loading the probes to all attached.
    pub attach_seconds: f64,
    /// zprof's resident memory.
    pub resident_bytes: u64,
    /// Time to read the maps for this scrape.
    pub collect_seconds: f64,
    /// Exported or destroyed pools whose rows were dropped.
    pub pools_forgotten: u64,
    /// The module's tunables of [`TUNABLES`] as read at this scrape (kernel
    /// only: libzpool's live in each process).
    pub tunables: Vec<(&'static Tunable, f64)>,
}
